//! Configuration loading on arbitrary bytes: a typed error, or a configuration that keeps every
//! pin (none weakened: "a config that weakens a pin does not load") and whose schedule
//! validates and, unless a trace is replayed, holds at least one request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use percentes_formats::config::Config;
use percentes_formats::pins::{self, PINS};
use percentes_formats::schedule::Workload;

fuzz_target!(|data: &[u8]| {
    let Ok(config) = Config::parse(data) else {
        return;
    };
    let params = config.schedule_params();
    assert_eq!(params.validate(), Ok(()), "a loaded config's schedule validates");
    if !matches!(params.workload, Workload::Replay { .. }) {
        assert!(params.iter().next().is_some(), "a loaded config schedules a request");
    }
    let in_force = config.pins_in_force();
    assert_eq!(in_force.len(), PINS.len(), "every pin is in force");
    for p in &in_force {
        assert!(
            !pins::weakens(p.pin, p.value),
            "{} = {} loaded, weakening its pin {}",
            p.pin.key,
            p.value,
            p.pin.value
        );
    }
});
