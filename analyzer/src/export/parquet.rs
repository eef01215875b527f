//! The Parquet files of the export, written through polars' own Parquet crate (polars-parquet)
//! rather than polars-io's writer.
//!
//! Why not polars-io: its Parquet feature turns on every codec polars-parquet has (brotli, gzip,
//! LZ4, Snappy and zstd), and cargo cannot turn one back off, while the export writes zstd alone:
//! the four others were about a megabyte of the shipped binary, brotli's dictionaries and tables
//! most of it, and LZ4's C build in every cold build (BENCHMARKS.md "A binary to ship"). What
//! polars-io's writer adds over polars-parquet is this module's few steps, done the same way, so
//! the files are the same bytes (held by `the_export_writes_the_bytes_polars_io_writes`): the
//! frame's schema as Arrow's at polars' newest compatibility level, each column's default
//! encoding, version 1 pages, the default statistics (minimum, maximum, null count) and data
//! page size, one row group per chunk of the frame, its columns encoded and compressed in
//! parallel on polars' thread pool, and the footer led by the Arrow schema, then the caller's
//! metadata in its order.

use std::io::Write;

use polars_core::frame::chunk_df_for_writing;
use polars_core::prelude::*;
use polars_core::runtime::RAYON;
use polars_parquet::read::ParquetError;
use polars_parquet::write::{
    array_to_columns, get_dtype_encoding, schema_to_metadata_key, CompressedPage,
    CompressionOptions, Compressor, DynIter, DynStreamingIterator, Encoding,
    FallibleStreamingIterator, FileWriter, KeyValue, ParquetType, StatisticsOptions, Version,
    WriteOptions,
};
use rayon::prelude::*;

/// The rows in a row group when a whole frame is written at once: polars' default.
const ROW_GROUP_ROWS: usize = 512 * 512;

/// One column's pages, encoded and compressed, as the file writer takes them.
type Pages = PolarsResult<DynStreamingIterator<'static, CompressedPage, PolarsError>>;

/// A Parquet file being written, a row group at a time.
pub(super) struct Writer<W: Write> {
    file: FileWriter<W>,
    /// Each column's Parquet type, in the schema's order.
    types: Vec<ParquetType>,
    /// Each column's encodings (one per leaf).
    encodings: Vec<Vec<Encoding>>,
    options: WriteOptions,
}

impl<W: Write> Writer<W> {
    /// A file of frames with `schema`, zstd at its default level, into `out`.
    pub(super) fn new(out: W, schema: &Schema) -> PolarsResult<Self> {
        let arrow = schema.to_arrow(CompatLevel::newest());
        let encodings = arrow
            .iter_values()
            .map(|field| get_dtype_encoding(&field.dtype))
            .collect();
        let options = WriteOptions {
            statistics: StatisticsOptions::default(),
            compression: CompressionOptions::Zstd(None),
            version: Version::V1,
            data_page_size: None,
        };
        let file = FileWriter::try_new(out, arrow, options)?;
        let types = file.parquet_schema().fields().to_vec();
        Ok(Writer {
            file,
            types,
            encodings,
            options,
        })
    }

    /// Writes `frame` (whose schema is the file's), one row group per chunk.
    pub(super) fn write(&mut self, frame: &DataFrame) -> PolarsResult<()> {
        for batch in frame.iter_chunks(CompatLevel::newest(), false) {
            let rows = batch.len();
            if rows == 0 {
                continue;
            }
            let options = self.options;
            let columns: Vec<Pages> = RAYON.install(|| {
                batch
                    .columns()
                    .par_iter()
                    .zip(&self.types)
                    .zip(&self.encodings)
                    .flat_map(|((array, kind), encodings)| pages(array, kind, encodings, options))
                    .collect()
            });
            self.file
                .write(rows as u64, DynIter::new(columns.into_iter()))?;
        }
        Ok(())
    }

    /// Writes the footer, its key-value metadata the Arrow schema followed by `metadata`, and
    /// returns the file's size in bytes.
    pub(super) fn finish(mut self, metadata: Vec<(String, String)>) -> PolarsResult<u64> {
        let mut footer = vec![schema_to_metadata_key(self.file.schema())];
        footer.extend(metadata.into_iter().map(|(key, value)| KeyValue {
            key,
            value: Some(value),
        }));
        self.file.end(Some(footer))
    }
}

/// Writes the whole of `frame` to `out`, in row groups of [`ROW_GROUP_ROWS`], with no metadata
/// beyond its schema; returns the file's size in bytes.
pub(super) fn write_frame<W: Write>(out: W, frame: &mut DataFrame) -> PolarsResult<u64> {
    let chunked = chunk_df_for_writing(frame, ROW_GROUP_ROWS)?;
    let mut writer = Writer::new(out, chunked.schema())?;
    writer.write(&chunked)?;
    writer.finish(Vec::new())
}

/// One column's pages: a stream per leaf (one for the flat columns the export writes), or the
/// one error that stopped its encoding.
fn pages(
    array: &ArrayRef,
    kind: &ParquetType,
    encodings: &[Encoding],
    options: WriteOptions,
) -> Vec<Pages> {
    let leaves = match array_to_columns(array, kind.clone(), options, encodings) {
        Ok(leaves) => leaves,
        Err(error) => return vec![Err(error)],
    };
    leaves
        .into_iter()
        .map(|encoded| {
            // The compressor takes polars-parquet's own error type: an encoding error travels
            // in it by its message, as in polars-io's writer.
            let encoded = encoded.map(|page| {
                page.map_err(|error| ParquetError::FeatureNotSupported(error.to_string()))
            });
            let compressed = Compressor::new_from_vec(encoded, options.compression, Vec::new())
                .map_err(PolarsError::from);
            Ok(DynStreamingIterator::new(compressed))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use polars_core::prelude::*;
    use polars_io::prelude::{
        KeyValueMetadata, ParquetCompression, ParquetReader, ParquetWriter, SerReader,
    };

    use crate::export::{labels, metadata, request_batches, server_frame, server_path};
    use crate::load::Run;

    /// The export as polars-io wrote it before this module (commit ed99834's `export.rs`): the
    /// request frame in batches of `batch_rows` through its batched writer, the server frame
    /// whole.
    fn by_polars_io(run: &Run, path: &Path, batch_rows: usize) {
        let (phases, routes) = labels(&run.header);
        let mut batches = request_batches(&run.requests, &phases, &routes, batch_rows);
        let first = batches.next().unwrap().unwrap();
        let mut writer = ParquetWriter::new(std::fs::File::create(path).unwrap())
            .with_compression(ParquetCompression::Zstd(None))
            .with_key_value_metadata(Some(KeyValueMetadata::from_static(metadata(run, None))))
            .batched(first.schema())
            .unwrap();
        writer.write_batch(&first).unwrap();
        for batch in batches {
            writer.write_batch(&batch.unwrap()).unwrap();
        }
        writer.finish().unwrap();
        if !run.scrapes.is_empty() {
            let mut frame = server_frame(&run.scrapes).unwrap();
            ParquetWriter::new(std::fs::File::create(server_path(path)).unwrap())
                .with_compression(ParquetCompression::Zstd(None))
                .finish(&mut frame)
                .unwrap();
        }
    }

    fn golden(name: &str) -> Run {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../golden/runs")
            .join(name);
        crate::load::load(&crate::JournalFile::open(&path).unwrap()).unwrap()
    }

    /// The files the export writes are the bytes polars-io's writer wrote for the same frames:
    /// the request table in one row group and in many (97-row batches), with the run's
    /// metadata, and the server table of a run that scraped vLLM's metrics. A Parquet file
    /// exported before this module is what the same journal exports now.
    #[test]
    fn the_export_writes_the_bytes_polars_io_writes() {
        let dir = percentes_testkit::Scratch::new("export-io");
        let mut servers = 0;
        for name in [
            "replica-loss-vllm-factor5.pj",
            "store-outage-under-spike.pj",
        ] {
            let run = golden(name);
            for batch_rows in [97, usize::MAX] {
                let ours = dir.join(format!("ours-{batch_rows}-{name}.parquet"));
                let theirs = dir.join(format!("theirs-{batch_rows}-{name}.parquet"));
                crate::export::parquet_in_batches(&run, &ours, batch_rows, None).unwrap();
                by_polars_io(&run, &theirs, batch_rows);
                let read = |path: &Path| std::fs::read(path).unwrap();
                assert!(
                    read(&ours) == read(&theirs),
                    "{name}, batches of {batch_rows}: the request table differs from polars-io's"
                );
                if !run.scrapes.is_empty() {
                    servers += 1;
                    assert!(
                        read(&server_path(&ours)) == read(&server_path(&theirs)),
                        "{name}: the server table differs from polars-io's"
                    );
                }
            }
        }
        assert_eq!(servers, 2, "a golden with scrapes must be compared");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file written in row groups reads back as the frames written, in their order.
    #[test]
    fn a_frame_written_whole_reads_back_the_same() {
        let mut frame = DataFrame::new(
            3,
            vec![
                Column::new("n".into(), [1u64, 2, 3]),
                Column::new("name".into(), [Some("a"), None, Some("c")]),
            ],
        )
        .unwrap();
        let scratch = percentes_testkit::Scratch::new("frame");
        let path = scratch.join("frame.parquet");
        super::write_frame(std::fs::File::create(&path).unwrap(), &mut frame).unwrap();
        let back = ParquetReader::new(std::fs::File::open(&path).unwrap())
            .finish()
            .unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(back.equals_missing(&frame), "{back} against {frame}");
    }
}
