//! The `redis-locks` command-line tool (placeholder; see issue #5).
fn main() {
    eprintln!("redis-locks: not implemented yet");
    std::process::exit(2);
}
