//! The job's config as it travels inside the sandbox: its length as 8
//! little-endian bytes, then the JSON. The shim sends it to a warm pid 1 on
//! the release socket, and pid 1 passes it on to the job process it forked
//! ahead. Framed, so the reader has it all without waiting for the end of
//! the stream (the close can come a scheduling round later).

use std::io::{self, Read, Write};

/// Largest job config accepted.
pub(crate) const MAX_JOB_CONFIG: u64 = 16 << 20;

/// `json` framed.
pub(crate) fn encode(json: &[u8]) -> Vec<u8> {
    let mut framed = (json.len() as u64).to_le_bytes().to_vec();
    framed.extend_from_slice(json);
    framed
}

/// Writes `json` framed.
pub(crate) fn write(to: &mut impl Write, json: &[u8]) -> io::Result<()> {
    to.write_all(&encode(json))
}

/// Reads one framed config; `Ok(None)` at end of file before its length
/// (the sender went away without one).
pub(crate) fn read(from: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 8];
    match from.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    read_body(from, u64::from_le_bytes(len)).map(Some)
}

/// The JSON of a frame whose length was read already.
pub(crate) fn read_body(from: &mut impl Read, len: u64) -> io::Result<Vec<u8>> {
    if len > MAX_JOB_CONFIG {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the job's config is {len} bytes, more than {MAX_JOB_CONFIG}"),
        ));
    }
    let mut json = vec![0u8; len as usize];
    from.read_exact(&mut json)?;
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_config_reads_back_and_an_empty_stream_is_none() {
        let mut buf = Vec::new();
        write(&mut buf, b"{\"a\":1}").unwrap();
        assert_eq!(buf.len(), 8 + 7);
        let mut r = &buf[..];
        assert_eq!(read(&mut r).unwrap().as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(read(&mut r).unwrap(), None);
        let mut cut = &buf[..10];
        assert!(read(&mut cut).is_err(), "a cut frame is an error");
        let mut huge = &(MAX_JOB_CONFIG + 1).to_le_bytes()[..];
        assert_eq!(
            read(&mut huge).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }
}
