//! Status lines on standard error, each written whole.
//!
//! Standard error is unbuffered, so `eprintln!` writes a formatted line piece by piece: a log
//! collector (or a test) reading the pipe can see half a line, and the lines of several processes
//! sharing the descriptor can splice. A line formatted first and written with one `write_all`
//! arrives whole (pipes write up to `PIPE_BUF` bytes atomically).

use std::io::Write;

/// Writes `line` and a newline to standard error in one write. Errors (a closed pipe) are
/// ignored, as `eprintln!` would panic on them and a status line is not worth a crash.
pub fn line(mut line: String) {
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `eprintln!`, but the line is written whole (see the module docs).
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say::line(format!($($arg)*))
    };
}
pub(crate) use say;
