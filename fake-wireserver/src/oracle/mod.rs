//! The independent parsers (the oracle): encoded reports, health XML/JSON, KVP pool files.
