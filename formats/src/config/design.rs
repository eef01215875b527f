//! A configuration's design: what it asks of the experiment, less where a testbed put things for
//! one run. A campaign groups its runs by it (SPEC §5 "Campaign groups"), so five runs of one
//! scenario, each on a testbed that chose its own free ports and wrote its pid files into its
//! own folder, are one configuration and not five.

use crate::journal::hex;

/// The keys a testbed fills per run (addresses it was given, files it wrote), `(section, key)`:
/// blanked before the design is hashed. A replica address table keeps its names and loses its
/// addresses. Nothing else is: a changed rate, route, seed or fault is a different design.
pub const TESTBED_LOCAL_KEYS: [(&str, &str); 6] = [
    ("target", "base_url"),
    ("target", "replica_addresses"),
    ("target", "nameserver"),
    ("fault", "pid_file"),
    ("fault", "confirm_address"),
    ("fault", "admin_address"),
];

/// The fault's commands, in which the network namespace a testbed made for the run (the word
/// after `netns exec`: `ip netns exec pcv29230r1 ...`) is testbed-local too: each run's testbed
/// names its namespaces afresh, so that two runs never share one.
pub const TESTBED_LOCAL_NAMESPACE_KEYS: [(&str, &str); 2] =
    [("fault", "fire_command"), ("fault", "remove_command")];

/// The BLAKE3 of the configuration's TOML with the testbed-local keys blanked (and the
/// namespaces in the fault's commands) and comments and layout dropped (its parsed form, keys
/// in order), hex; `None` for bytes that are not a TOML document (a journal whose configuration
/// loaded is never that).
pub fn design_hash(config_bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(config_bytes).ok()?;
    let mut table: toml::Table = text.parse().ok()?;
    // A user's pass/fail criteria judge a run; they do not change what it measures.
    table.remove("thresholds");
    for (section, key) in TESTBED_LOCAL_KEYS {
        let Some(toml::Value::Table(section)) = table.get_mut(section) else {
            continue;
        };
        match section.get_mut(key) {
            Some(toml::Value::Table(addresses)) => {
                for (_, value) in addresses.iter_mut() {
                    *value = toml::Value::String(String::new());
                }
            }
            Some(value) => *value = toml::Value::String(String::new()),
            None => {}
        }
    }
    for (section, key) in TESTBED_LOCAL_NAMESPACE_KEYS {
        let Some(toml::Value::Table(section)) = table.get_mut(section) else {
            continue;
        };
        if let Some(toml::Value::Array(argv)) = section.get_mut(key) {
            blank_namespaces(argv);
        }
    }
    let canonical = toml::to_string(&table).ok()?;
    Some(hex(blake3::hash(canonical.as_bytes()).as_bytes()))
}

/// Blanks each word that follows `netns exec` in `argv`.
fn blank_namespaces(argv: &mut [toml::Value]) {
    for i in 2..argv.len() {
        let word = |k: usize| argv[k].as_str();
        if word(i - 2) == Some("netns") && word(i - 1) == Some("exec") {
            argv[i] = toml::Value::String(String::new());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN_1: &str = "# run 1\nschema_version = 1\n[target]\nbase_url = \"http://127.0.0.1:40001\"\nreplica_addresses = { \"replica-0\" = \"127.0.0.1:40002\" }\n[fault]\nvariant = \"clean-delete\"\npid_file = \"/tmp/run-1/replica-1.pid\"\nconfirm_address = \"127.0.0.1:40003\"\n";

    #[test]
    fn runs_that_differ_only_where_the_testbed_put_them_share_a_design() {
        let run_2 = RUN_1
            .replace("# run 1", "# run 2, another comment")
            .replace("40001", "51001")
            .replace("40002", "51002")
            .replace("40003", "51003")
            .replace("run-1", "run-2");
        let one = design_hash(RUN_1.as_bytes()).unwrap();
        assert_eq!(one.len(), 64);
        assert_eq!(Some(one.clone()), design_hash(run_2.as_bytes()));
        // A replica renamed, a variant changed or a key added is another design.
        for other in [
            RUN_1.replace("\"replica-0\"", "\"replica-9\""),
            RUN_1.replace("clean-delete", "black-hole"),
            RUN_1.replace("schema_version = 1", "schema_version = 1\nseed = 2"),
        ] {
            assert_ne!(Some(one.clone()), design_hash(other.as_bytes()), "{other}");
        }
        assert_eq!(design_hash(b"not = [toml"), None);
    }

    /// Two black-hole runs of one scenario: each testbed named its namespaces afresh
    /// (studies/replica-loss-black-hole-vllm's partition-1 and -2). What the command does is
    /// still the design.
    #[test]
    fn the_namespace_a_fault_command_runs_in_is_the_testbeds() {
        let run = |namespace: &str, rule: &str| {
            format!("schema_version = 1\n[fault]\nvariant = \"black-hole\"\nfire_command = [\"ip\", \"netns\", \"exec\", \"{namespace}\", \"sh\", \"-c\", \"iptables -I INPUT {rule} -j DROP\"]\nremove_command = [\"ip\", \"netns\", \"exec\", \"{namespace}\", \"true\"]\n")
        };
        let one = design_hash(run("pcv29230r1", "! -i lo").as_bytes());
        assert!(one.is_some());
        assert_eq!(one, design_hash(run("pcv29700r1", "! -i lo").as_bytes()));
        assert_ne!(one, design_hash(run("pcv29230r1", "").as_bytes()));
        // Only the word after `netns exec` is the testbed's.
        let other = run("pcv29230r1", "! -i lo").replace("\"true\"", "\"false\"");
        assert_ne!(one, design_hash(other.as_bytes()));
        assert_eq!(design_hash(&[0xff, 0xfe]), None);
    }
}
