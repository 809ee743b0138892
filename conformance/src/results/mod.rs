//! Run results: the model and its writers (JSON, JUnit, HTML).
