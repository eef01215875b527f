//! TLS for https targets (rustls through compio-tls): the connector, with verification on by
//! default and the recorded insecure mode.

use std::sync::Arc;

use compio::tls::TlsConnector;
use percentes_formats::config::Config;

use crate::error::RecordError;

/// Accepts any certificate (target.tls.insecure): the handshake's signatures are still checked,
/// the certificate chain is not. Recorded in the journal's host facts.
#[derive(Debug)]
pub(super) struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The TLS client configuration for an https target: Mozilla's roots plus `target.tls.ca_file`,
/// ALPN as `target.http` says (`http/1.1`; `h2`; or both, `h2` first), verification on unless
/// `target.tls.insecure`.
pub(super) fn tls_connector(config: &Config) -> Result<TlsConnector, RecordError> {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = &config.target.tls.ca_file {
        let certificates = rustls::pki_types::CertificateDer::pem_file_iter(path)
            .map_err(|e| RecordError::config(format!("target.tls.ca_file {path}: {e}")))?;
        for certificate in certificates {
            let certificate = certificate
                .map_err(|e| RecordError::config(format!("target.tls.ca_file {path}: {e}")))?;
            roots
                .add(certificate)
                .map_err(|e| RecordError::config(format!("target.tls.ca_file {path}: {e}")))?;
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| RecordError::config(format!("TLS setup: {e}")))?;
    let mut tls = if config.target.tls.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    tls.alpn_protocols = config.target.http.alpn();
    Ok(TlsConnector::from(Arc::new(tls)))
}
