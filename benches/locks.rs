//! The benchmark command (placeholder).
fn main() {}
