//! `input.sock`, an interactive job's input: what the daemon sends the shim
//! for a client attached to the job (`rnx job run -i/-t`, `rnx job attach`).
//!
//! A connection opens with the line `attach\n`; the shim answers `ok\n`,
//! or `err <why>\n` and closes (another client is attached: one writer at
//! a time; that answer may come before the hello is read, so a client
//! reads the answer even when sending its hello failed). Then frames follow, client to shim only, until either side
//! closes: one tag byte, the payload's length (u32, big endian), the
//! payload. The job's output does not pass here: clients read it from
//! `output.log` like any follower, so it survives the daemon and is the
//! same for watchers and the writer.

use std::io::{self, Read};

/// The request line that opens a connection.
pub const HELLO: &[u8] = b"attach\n";
/// Largest payload accepted (a data frame larger is split by the sender).
pub const MAX_PAYLOAD: usize = 64 * 1024;

const TAG_DATA: u8 = b'D';
const TAG_RESIZE: u8 = b'R';
const TAG_CLOSE: u8 = b'C';

/// One message to the shim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Bytes for the job's standard input (for a terminal: keystrokes,
    /// which the terminal turns into signals where they are Ctrl-C & co.).
    Data(Vec<u8>),
    /// The client's terminal is now `rows` × `cols`.
    Resize { rows: u16, cols: u16 },
    /// End of input: the job's stdin pipe is closed (ignored on a
    /// terminal, where Ctrl-D is the end of input).
    CloseStdin,
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("reading a frame: {0}")]
    Io(#[from] io::Error),
    #[error("unknown frame tag {0:#04x}")]
    Tag(u8),
    #[error("a frame of {0} bytes is larger than {MAX_PAYLOAD}")]
    TooLarge(usize),
    #[error("a {what} frame has {len} bytes of payload; expected {expected}")]
    Length {
        what: &'static str,
        len: usize,
        expected: usize,
    },
}

impl Frame {
    /// The frame's bytes on the socket. `Data` must hold at most
    /// [`MAX_PAYLOAD`] bytes ([`data_frames`] splits larger input).
    pub fn encode(&self) -> Vec<u8> {
        let (tag, payload): (u8, &[u8]) = match self {
            Frame::Data(d) => (TAG_DATA, d),
            Frame::Resize { rows, cols } => {
                let mut out = vec![TAG_RESIZE, 0, 0, 0, 4];
                out.extend_from_slice(&rows.to_be_bytes());
                out.extend_from_slice(&cols.to_be_bytes());
                return out;
            }
            Frame::CloseStdin => (TAG_CLOSE, &[]),
        };
        let mut out = Vec::with_capacity(5 + payload.len());
        out.push(tag);
        // At most MAX_PAYLOAD (see above), so it fits a u32.
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// Reads one frame; `Ok(None)` at end of file between frames.
    pub fn read(r: &mut impl Read) -> Result<Option<Frame>, FrameError> {
        let mut head = [0u8; 5];
        match r.read(&mut head[..1])? {
            0 => return Ok(None),
            _ => r.read_exact(&mut head[1..])?,
        }
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(FrameError::TooLarge(len));
        }
        let mut payload = vec![0u8; len];
        r.read_exact(&mut payload)?;
        match head[0] {
            TAG_DATA => Ok(Some(Frame::Data(payload))),
            TAG_RESIZE => match payload[..] {
                [r0, r1, c0, c1] => Ok(Some(Frame::Resize {
                    rows: u16::from_be_bytes([r0, r1]),
                    cols: u16::from_be_bytes([c0, c1]),
                })),
                _ => Err(FrameError::Length {
                    what: "resize",
                    len,
                    expected: 4,
                }),
            },
            TAG_CLOSE if len == 0 => Ok(Some(Frame::CloseStdin)),
            TAG_CLOSE => Err(FrameError::Length {
                what: "close",
                len,
                expected: 0,
            }),
            t => Err(FrameError::Tag(t)),
        }
    }
}

/// `data` as data frames of at most [`MAX_PAYLOAD`] bytes each, encoded.
pub fn data_frames(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 5);
    for chunk in data.chunks(MAX_PAYLOAD) {
        out.extend_from_slice(&Frame::Data(chunk.to_vec()).encode());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame() -> impl Strategy<Value = Frame> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(Frame::Data),
            (any::<u16>(), any::<u16>()).prop_map(|(rows, cols)| Frame::Resize { rows, cols }),
            Just(Frame::CloseStdin),
        ]
    }

    proptest! {
        #[test]
        fn frames_read_back_as_written(frames in proptest::collection::vec(frame(), 0..20)) {
            let bytes: Vec<u8> = frames.iter().flat_map(Frame::encode).collect();
            let mut r = &bytes[..];
            let mut back = Vec::new();
            while let Some(f) = Frame::read(&mut r).unwrap() {
                back.push(f);
            }
            prop_assert_eq!(back, frames);
        }
    }

    #[test]
    fn bad_frames_are_named() {
        let e = Frame::read(&mut &b"X\0\0\0\0"[..]).unwrap_err();
        assert!(e.to_string().contains("unknown frame tag 0x58"), "{e}");
        let e = Frame::read(&mut &b"R\0\0\0\x01x"[..]).unwrap_err();
        assert!(e.to_string().contains("resize frame has 1 bytes"), "{e}");
        let e = Frame::read(&mut &b"D\xff\xff\xff\xff"[..]).unwrap_err();
        assert!(matches!(e, FrameError::TooLarge(_)), "{e}");
        // Cut in the middle of a frame: an error, not a quiet end.
        assert!(Frame::read(&mut &b"D\0\0\0\x05ab"[..]).is_err());
    }

    #[test]
    fn large_input_is_split() {
        let data = vec![7u8; MAX_PAYLOAD * 2 + 3];
        let bytes = data_frames(&data);
        let mut r = &bytes[..];
        let mut got = Vec::new();
        while let Some(Frame::Data(d)) = Frame::read(&mut r).unwrap() {
            assert!(d.len() <= MAX_PAYLOAD);
            got.extend(d);
        }
        assert_eq!(got, data);
    }
}
