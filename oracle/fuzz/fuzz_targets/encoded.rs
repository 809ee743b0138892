#![no_main]
//! Any string: both modes return, and whatever strict accepts lenient reads the same way.

use wirecheck_oracle::{Mode, encoded};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &str| {
    let strict = encoded::parse(input, Mode::Strict);
    let lenient = encoded::parse(input, Mode::Lenient);
    if let Ok(strict) = strict {
        assert_eq!(
            strict.fields,
            lenient.expect("lenient accepts what strict accepts").fields
        );
    }
});
