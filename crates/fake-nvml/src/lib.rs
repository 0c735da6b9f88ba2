//! A fake `libnvidia-ml.so` (see the crate description).
