//! The waiting indicator: one line on a terminal's stderr, redrawn about once a second
//! with the time waited and the current holder, while `run` is blocked on a lock.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use redis_locks::{Lock, LockState};
use tokio::time::Instant;

use crate::duration::human;

/// How long to wait before drawing anything, so an uncontended acquire stays silent.
const FIRST_DRAW: Duration = Duration::from_millis(500);
const REDRAW: Duration = Duration::from_secs(1);

/// Whether the indicator should be shown: stderr is a terminal and output is not quiet.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

/// Shows the indicator until dropped (the line is cleared then). Never returns.
pub async fn show(lock: &Lock, since: Instant) {
    let mut line = Line { drawn: false };
    tokio::time::sleep(FIRST_DRAW).await;
    let mut ticks = tokio::time::interval(REDRAW);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let state = tokio::time::timeout(REDRAW, lock.state())
            .await
            .ok()
            .and_then(Result::ok);
        line.draw(&render(lock.name(), since.elapsed(), state.as_ref()));
    }
}

/// The indicator's text. The holder's (long) owner id comes last, so a narrow terminal
/// cuts it rather than the times.
pub fn render(name: &str, waited: Duration, state: Option<&LockState>) -> String {
    let holder = match state {
        None => "holder unknown".to_owned(),
        Some(state) => match state.holders.as_slice() {
            [] => "free, retrying".to_owned(),
            [(owner, count), rest @ ..] => {
                let mut text = match state.ttl {
                    Some(ttl) => format!("expires in {}, held by {owner}", human(ttl)),
                    None => format!("held by {owner}"),
                };
                if *count > 1 {
                    text.push_str(&format!(" (x{count})"));
                }
                if !rest.is_empty() {
                    text.push_str(&format!(" and {} more", rest.len()));
                }
                text
            }
        },
    };
    format!(
        "redis-locks: waiting for lock {name:?} ({}): {holder}",
        human(waited)
    )
}

/// The line on stderr; cleared when dropped if something was drawn.
struct Line {
    drawn: bool,
}

impl Line {
    fn draw(&mut self, text: &str) {
        let width = terminal_width().saturating_sub(1).max(10);
        let text: String = text.chars().take(width).collect();
        let mut stderr = std::io::stderr().lock();
        // \r: back to the line's start; ESC[K: erase to its end.
        let _ = write!(stderr, "\r\x1b[K{text}");
        let _ = stderr.flush();
        self.drawn = true;
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.drawn {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[K");
            let _ = stderr.flush();
        }
    }
}

/// Columns of the terminal on stderr (80 when unknown). A line longer than this would
/// wrap, and `\r` could not erase it.
fn terminal_width() -> usize {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which is valid for
    // the duration of the call.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    if ok && size.ws_col > 0 {
        usize::from(size.ws_col)
    } else {
        80
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_holder_and_time() {
        let state = LockState {
            holders: vec![("abc:cli-7".into(), 2), ("other".into(), 1)],
            ttl: Some(Duration::from_millis(25_400)),
            fence: None,
            hold_token: None,
        };
        assert_eq!(
            render("job", Duration::from_secs(65), Some(&state)),
            "redis-locks: waiting for lock \"job\" (1m05s): expires in 25.4s, held by abc:cli-7 \
             (x2) and 1 more"
        );
        let free = LockState {
            holders: vec![],
            ttl: None,
            fence: None,
            hold_token: None,
        };
        assert!(render("job", Duration::ZERO, Some(&free)).ends_with("free, retrying"));
        assert!(render("job", Duration::ZERO, None).ends_with("holder unknown"));
    }
}
