//! Building a call's arguments without waste: every acquire and release builds a few
//! short strings (a hold's value, a lease, a request id's parts), and on a busy client
//! the allocator was a tenth of its CPU. `format!` grows its `String` step by step
//! (several reallocations for a 60-byte value) and converting that `String` into the
//! shared `Arc<str>` a [`Call`](super::Call) holds copies it once more. Here each string is
//! written into a reused per-thread buffer and copied once into its `Arc<str>`, and the
//! numbers the scripts take most often (`0` to `9`) are shared constants.

use std::cell::RefCell;
use std::fmt::Write;
use std::sync::{Arc, LazyLock};

thread_local! {
    /// The buffer strings are written into before they are copied into their `Arc<str>`.
    static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A buffer that grew past this is given back rather than kept for the thread's life.
const SCRATCH_KEEP: usize = 4096;

/// `0` to `9`, shared: a clone is a reference count, not an allocation.
static DIGITS: LazyLock<[Arc<str>; 10]> =
    LazyLock::new(|| std::array::from_fn(|d| Arc::from(d.to_string())));

/// Writes with `write` into the thread's buffer and returns the result as one `Arc<str>`
/// (one allocation).
fn build(write: impl FnOnce(&mut String)) -> Arc<str> {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            write(&mut buffer);
            let built = Arc::from(buffer.as_str());
            if buffer.capacity() > SCRATCH_KEEP {
                *buffer = String::new();
            }
            built
        }
        // Only if `write` itself built an argument (it does not): a buffer of its own.
        Err(_) => {
            let mut own = String::new();
            write(&mut own);
            Arc::from(own)
        }
    })
}

/// The concatenation of `parts`.
///
/// ```
/// # use redis_locks_protocol::args::joined;
/// assert_eq!(&*joined(&["\u{1}", "c.1", "\u{1}", "owner"]), "\u{1}c.1\u{1}owner");
/// ```
pub fn joined(parts: &[&str]) -> Arc<str> {
    build(|buffer| parts.iter().for_each(|part| buffer.push_str(part)))
}

/// `n` in decimal.
///
/// ```
/// # use redis_locks_protocol::args::number;
/// assert_eq!(&*number(7), "7");
/// assert_eq!(&*number(30_000), "30000");
/// ```
pub fn number(n: u64) -> Arc<str> {
    match usize::try_from(n) {
        Ok(digit) if digit < 10 => DIGITS[digit].clone(),
        _ => build(|buffer| {
            // Writing into a `String` cannot fail.
            let _ = write!(buffer, "{n}");
        }),
    }
}

/// `parts` followed by `n` in decimal (a request id, `<tag>.<seq>`; an owner id,
/// `<client id>:<n>`).
///
/// ```
/// # use redis_locks_protocol::args::numbered;
/// assert_eq!(&*numbered(&["c", "."], 12), "c.12");
/// ```
pub fn numbered(parts: &[&str], n: u64) -> Arc<str> {
    build(|buffer| {
        parts.iter().for_each(|part| buffer.push_str(part));
        let _ = write!(buffer, "{n}");
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_read_as_format_would_write_them() {
        for n in [0, 9, 10, 99, 12345, u64::MAX] {
            assert_eq!(&*number(n), n.to_string());
            assert_eq!(&*numbered(&["tag", "."], n), format!("tag.{n}"));
        }
        assert_eq!(&*joined(&[]), "");
        let long = "x".repeat(SCRATCH_KEEP + 1);
        assert_eq!(&*joined(&[&long, "y"]), format!("{long}y"));
        // The buffer was given back, and the next string is still right.
        assert_eq!(&*joined(&["a", "b"]), "ab");
    }
}
