//! HAProxy's Stream Processing Offload Protocol, SPOP 2.0, as specified in
//! HAProxy's doc/SPOE.txt (section 3): the frames an agent reads and
//! writes, and their encoding. No fragmentation, pipelining or async: the
//! agent announces none, so HAProxy sends one unfragmented NOTIFY at a time
//! per connection and waits for its ACK.
//!
//! A frame is `<LENGTH:4 bytes, big-endian> <TYPE:1> <FLAGS:4, big-endian>
//! <STREAM-ID:varint> <FRAME-ID:varint> <PAYLOAD>`. Strings (KV names,
//! message names, variable names) are `<LENGTH:varint> <BYTES>`; values
//! are typed: `<TYPE:4 bits | FLAGS:4 bits> <DATA>`.

use anyhow::{bail, ensure, Context, Result};

pub const HAPROXY_HELLO: u8 = 1;
pub const HAPROXY_DISCONNECT: u8 = 2;
pub const NOTIFY: u8 = 3;
pub const AGENT_HELLO: u8 = 101;
pub const AGENT_DISCONNECT: u8 = 102;
pub const ACK: u8 = 103;

/// The FIN flag: the frame is the last (here: the only) of its payload.
pub const FLAG_FIN: u32 = 1;

/// The action SET-VAR, and the variable scopes.
const ACTION_SET_VAR: u8 = 1;
pub const SCOPE_TRANSACTION: u8 = 2;

/// Encodes `v` as SPOP's varint (HAProxy's "Peers encoding"): below 240 in
/// one byte; otherwise a first byte `v | 0xF0`, then `(v - 240) >> 4` in
/// groups of 7 bits, each but the last with its high bit set (each group
/// after taking 128 off what is left).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    if v < 240 {
        out.push(v as u8);
        return;
    }
    out.push(v as u8 | 0xF0);
    v = (v - 240) >> 4;
    while v >= 128 {
        out.push(v as u8 | 0x80);
        v = (v - 128) >> 7;
    }
    out.push(v as u8);
}

/// A typed value, borrowed from the frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    Int32(i32),
    Uint32(u32),
    Int64(i64),
    Uint64(u64),
    Ipv4([u8; 4]),
    Ipv6([u8; 16]),
    Str(&'a [u8]),
    Bin(&'a [u8]),
}

impl<'a> Value<'a> {
    /// Any integer type (HAProxy sends max-frame-size as UINT32).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::Int32(v) => u64::try_from(v).ok(),
            Value::Uint32(v) => Some(v.into()),
            Value::Int64(v) => u64::try_from(v).ok(),
            Value::Uint64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match *self {
            Value::Str(b) | Value::Bin(b) => Some(b),
            _ => None,
        }
    }
}

/// Reads a frame (or any SPOP buffer) front to back.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        ensure!(
            n <= self.buf.len(),
            "truncated: {n} bytes wanted, {} left",
            self.buf.len()
        );
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.bytes(4)?.try_into().unwrap()))
    }

    /// The inverse of [`put_varint`]; a value past u64 is an error.
    pub fn varint(&mut self) -> Result<u64> {
        let first = self.u8()?;
        let mut v = u128::from(first);
        if first < 240 {
            return Ok(first.into());
        }
        let mut shift = 4;
        loop {
            ensure!(shift <= 60, "varint too long");
            let b = self.u8()?;
            v += u128::from(b) << shift;
            shift += 7;
            if b < 128 {
                return u64::try_from(v).context("varint past u64");
            }
        }
    }

    /// `<LENGTH:varint> <BYTES>`.
    pub fn string(&mut self) -> Result<&'a [u8]> {
        let n = self.varint()?;
        self.bytes(usize::try_from(n).context("string length")?)
    }

    pub fn value(&mut self) -> Result<Value<'a>> {
        let tag = self.u8()?;
        Ok(match tag & 0x0F {
            0 => Value::Null,
            1 => Value::Bool(tag & 0x10 != 0),
            // Signed integers travel as their two's complement, cast.
            2 => Value::Int32(self.varint()? as i32),
            3 => Value::Uint32(u32::try_from(self.varint()?).context("UINT32 past u32")?),
            4 => Value::Int64(self.varint()? as i64),
            5 => Value::Uint64(self.varint()?),
            6 => Value::Ipv4(self.bytes(4)?.try_into().unwrap()),
            7 => Value::Ipv6(self.bytes(16)?.try_into().unwrap()),
            8 => Value::Str(self.string()?),
            9 => Value::Bin(self.string()?),
            t => bail!("unknown data type {t}"),
        })
    }

    /// A KV-LIST, to the end of the buffer.
    pub fn kv_list(&mut self) -> Result<Vec<(&'a [u8], Value<'a>)>> {
        let mut items = Vec::new();
        while !self.is_empty() {
            items.push((self.string()?, self.value()?));
        }
        Ok(items)
    }
}

/// A frame, its length prefix taken off.
#[derive(Debug)]
pub struct Frame<'a> {
    pub kind: u8,
    pub flags: u32,
    pub stream_id: u64,
    pub frame_id: u64,
    pub payload: &'a [u8],
}

impl<'a> Frame<'a> {
    pub fn parse(buf: &'a [u8]) -> Result<Frame<'a>> {
        let mut r = Reader::new(buf);
        Ok(Frame {
            kind: r.u8()?,
            flags: r.u32()?,
            stream_id: r.varint()?,
            frame_id: r.varint()?,
            payload: r.buf,
        })
    }

    pub fn kv_list(&self) -> Result<Vec<(&'a [u8], Value<'a>)>> {
        Reader::new(self.payload).kv_list()
    }

    /// A NOTIFY's LIST-OF-MESSAGES: `<NAME> <NB-ARGS:1 byte> <KV>...`.
    pub fn messages(&self) -> Result<Vec<Message<'a>>> {
        let mut r = Reader::new(self.payload);
        let mut messages = Vec::new();
        while !r.is_empty() {
            let name = r.string()?;
            let n = r.u8()?;
            let args = (0..n)
                .map(|_| Ok((r.string()?, r.value()?)))
                .collect::<Result<_>>()?;
            messages.push(Message { name, args });
        }
        Ok(messages)
    }
}

#[derive(Debug)]
pub struct Message<'a> {
    pub name: &'a [u8],
    pub args: Vec<(&'a [u8], Value<'a>)>,
}

/// Builds one frame, length prefix included.
pub struct FrameWriter {
    buf: Vec<u8>,
}

impl FrameWriter {
    pub fn new(kind: u8, stream_id: u64, frame_id: u64) -> FrameWriter {
        let mut buf = vec![0; 4];
        buf.push(kind);
        buf.extend_from_slice(&FLAG_FIN.to_be_bytes());
        put_varint(&mut buf, stream_id);
        put_varint(&mut buf, frame_id);
        FrameWriter { buf }
    }

    fn string(&mut self, s: &[u8]) {
        put_varint(&mut self.buf, s.len() as u64);
        self.buf.extend_from_slice(s);
    }

    pub fn kv_str(mut self, key: &str, value: &str) -> FrameWriter {
        self.string(key.as_bytes());
        self.buf.push(8);
        self.string(value.as_bytes());
        self
    }

    pub fn kv_u32(mut self, key: &str, value: u32) -> FrameWriter {
        self.string(key.as_bytes());
        self.buf.push(3);
        put_varint(&mut self.buf, value.into());
        self
    }

    /// The action SET-VAR: `<1> <NB-ARGS=3> <SCOPE:1 byte> <NAME> <VALUE>`,
    /// the value a string.
    pub fn set_var_str(mut self, scope: u8, name: &str, value: &str) -> FrameWriter {
        self.buf.extend_from_slice(&[ACTION_SET_VAR, 3, scope]);
        self.string(name.as_bytes());
        self.buf.push(8);
        self.string(value.as_bytes());
        self
    }

    pub fn finish(mut self) -> Vec<u8> {
        let len = (self.buf.len() - 4) as u32;
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }
}

/// AGENT-DISCONNECT with a status code of SPOE.txt's section 3.5.
pub fn agent_disconnect(status: u32, message: &str) -> Vec<u8> {
    FrameWriter::new(AGENT_DISCONNECT, 0, 0)
        .kv_u32("status-code", status)
        .kv_str("message", message)
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(v: u64) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, v);
        b
    }

    #[test]
    fn varint_round_trips_at_every_width_boundary() {
        // SPOE.txt: 1 byte below 240, 2 below 2288, 3 below 264432, 4 below
        // 33818864, 5 below 4328786160.
        let cases = [
            (0, 1),
            (239, 1),
            (240, 2),
            (2287, 2),
            (2288, 3),
            (264431, 3),
            (264432, 4),
            (33818863, 4),
            (33818864, 5),
            (u32::MAX as u64, 5),
            (4328786159, 5),
            (4328786160, 6),
            (1 << 50, 8),
            (u64::MAX - 1, 10),
            (u64::MAX, 10),
        ];
        for (v, len) in cases {
            let b = varint(v);
            assert_eq!(b.len(), len, "{v}: {b:02x?}");
            let mut r = Reader::new(&b);
            assert_eq!(r.varint().unwrap(), v, "{b:02x?}");
            assert!(r.is_empty());
        }
        // As HAProxy writes them.
        assert_eq!(varint(240), [0xF0, 0x00]);
        assert_eq!(varint(16380), [0xFC, 0xF0, 0x06]);
    }

    #[test]
    fn varint_rejects_truncation_and_overflow() {
        assert!(Reader::new(&[0xF0]).varint().is_err());
        assert!(Reader::new(&[0xF0, 0x80]).varint().is_err());
        assert!(Reader::new(&[0xFF; 12]).varint().is_err());
        assert!(
            Reader::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F])
                .varint()
                .is_err()
        );
    }

    /// A HAPROXY-HELLO as HAProxy 2.6 sends it (spoe_prepare_hahello_frame).
    fn haproxy_hello() -> Vec<u8> {
        let mut f = vec![HAPROXY_HELLO, 0, 0, 0, 1, 0, 0];
        let kv = |f: &mut Vec<u8>, k: &str, tag: u8, v: &[u8]| {
            f.push(k.len() as u8);
            f.extend_from_slice(k.as_bytes());
            f.push(tag);
            f.extend_from_slice(v);
        };
        kv(&mut f, "supported-versions", 8, b"\x032.0");
        kv(&mut f, "max-frame-size", 3, &varint(16380));
        kv(&mut f, "capabilities", 8, b"\x10pipelining,async");
        kv(&mut f, "engine-id", 8, b"\x05E-123");
        kv(&mut f, "healthcheck", 0x11, b"");
        let mut framed = (f.len() as u32).to_be_bytes().to_vec();
        framed.extend(f);
        framed
    }

    #[test]
    fn parses_a_haproxy_hello() {
        let buf = haproxy_hello();
        let len = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
        assert_eq!(len, buf.len() - 4);
        let frame = Frame::parse(&buf[4..]).unwrap();
        assert_eq!((frame.kind, frame.flags), (HAPROXY_HELLO, FLAG_FIN));
        assert_eq!((frame.stream_id, frame.frame_id), (0, 0));
        let kv = frame.kv_list().unwrap();
        let names: Vec<&[u8]> = kv.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            names,
            [
                &b"supported-versions"[..],
                b"max-frame-size",
                b"capabilities",
                b"engine-id",
                b"healthcheck"
            ]
        );
        assert_eq!(kv[0].1, Value::Str(b"2.0"));
        assert_eq!(kv[1].1.as_u64(), Some(16380));
        assert_eq!(kv[2].1.as_bytes(), Some(&b"pipelining,async"[..]));
        assert_eq!(kv[4].1, Value::Bool(true));
        // Cut anywhere inside its items, it is an error, never a panic.
        for cut in 11..buf.len() - 1 {
            let f = Frame::parse(&buf[4..cut]).unwrap();
            let _ = f.kv_list();
        }
        assert!(Frame::parse(&buf[4..9]).is_err());
    }

    #[test]
    fn parses_notify_messages_and_writes_an_ack() {
        let mut f = vec![NOTIFY, 0, 0, 0, 1];
        f.extend(varint(2288));
        f.extend(varint(7));
        f.extend(b"\x0dcheck-request\x03");
        f.extend(b"\x06method\x08\x03GET");
        f.extend(b"\x04path\x08\x07/attack");
        f.extend(b"\x03src\x06\x7f\x00\x00\x01");
        let frame = Frame::parse(&f).unwrap();
        assert_eq!((frame.stream_id, frame.frame_id), (2288, 7));
        let m = frame.messages().unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].name, b"check-request");
        assert_eq!(m[0].args[1], (&b"path"[..], Value::Str(b"/attack")));
        assert_eq!(m[0].args[2].1, Value::Ipv4([127, 0, 0, 1]));

        let ack = FrameWriter::new(ACK, 2288, 7)
            .set_var_str(SCOPE_TRANSACTION, "action", "deny")
            .finish();
        let mut want = vec![0, 0, 0, 0, ACK, 0, 0, 0, 1, 0xF0, 0x80, 0x00, 7];
        want.extend(b"\x01\x03\x02\x06action\x08\x04deny");
        want[3] = (want.len() - 4) as u8;
        assert_eq!(ack, want);
    }
}
