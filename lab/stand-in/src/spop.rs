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
    /// Decoded and checked by the tests; the verdict looks at every
    /// message's arguments whatever its name, as the example's one
    /// message (`check-request`) needs.
    #[cfg_attr(not(test), expect(dead_code, reason = "read by the decoder's tests only"))]
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
mod tests;
