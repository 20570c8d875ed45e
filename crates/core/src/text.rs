//! Text for a terminal.

use std::borrow::Cow;

/// `text` with its control characters written as escapes (`\u{1b}`, `\n`), for a terminal or
/// a one-line-per-row table: a task, process or region name can hold an escape sequence or a
/// newline, and printed raw it recoloured the terminal or split its row (CLI probes, sessions
/// 27 and 29). JSON and CSV keep the name as it is, escaped by their own rules.
///
/// ```
/// use counterpoint_core::text::printable;
/// assert_eq!(printable("plain"), "plain");
/// assert_eq!(printable("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
/// ```
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}
