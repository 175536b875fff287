//! Bounded reading of inputs: every tool and pass that reads a file reads
//! at most [`MAX_INPUT_BYTES`] of UTF-8 text.

/// The largest input a tool reads (256 MiB): beyond it (or from an endless
/// device such as `/dev/zero`) reading stops with an error.
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

/// Read at most [`MAX_INPUT_BYTES`] of UTF-8 text from `r` (`what` names
/// it in errors).
pub fn read_limited(r: impl std::io::Read, what: &str) -> Result<String, String> {
    use std::io::Read;
    let mut buf = Vec::new();
    r.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read {what}: {e}"))?;
    if buf.len() as u64 > MAX_INPUT_BYTES {
        return Err(format!(
            "{what} is larger than {} MiB, the most an efir tool reads",
            MAX_INPUT_BYTES >> 20
        ));
    }
    String::from_utf8(buf).map_err(|e| {
        format!(
            "{what} is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}
