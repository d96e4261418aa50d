//! The worker-message parser on arbitrary bytes: it must never panic, a line it accepts
//! must render back to a line that parses to the same value, the `&str` and `&[u8]` entry
//! points must agree, and the text-block scanner must survive the same bytes.

#![no_main]

use executor::protocol::{self, Scanner};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parsed = protocol::parse_bytes(data);
    if let Ok(text) = std::str::from_utf8(data) {
        assert_eq!(protocol::parse_line(text), parsed);
        for found in protocol::scan(text) {
            let _ = found.parsed;
        }
    }
    if let Ok(Some(value)) = parsed {
        let line = value.to_line();
        assert_eq!(
            protocol::parse_line(&line),
            Ok(Some(value)),
            "rendered as {line:?}"
        );
    }
    let mut scanner = Scanner::new();
    for line in data.split(|b| *b == b'\n') {
        let _ = scanner.line_bytes(line);
    }
});
