//! Configuration loading on arbitrary bytes: a typed error or a config, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use percentes_formats::config::Config;

fuzz_target!(|data: &[u8]| {
    if let Ok(config) = Config::parse(data) {
        let params = config.schedule_params();
        let _ = params.validate();
        let _ = config.pins_in_force();
    }
});
