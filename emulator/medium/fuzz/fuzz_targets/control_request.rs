//! Any bytes as a request line on the control socket: the parser answers
//! with a request or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshemu_medium::control::parse_request;

fuzz_target!(|data: &[u8]| {
    let _ = parse_request(data);
});
