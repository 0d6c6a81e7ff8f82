//! Minimal reader for the kernel's BTF type information.
//!
//! Our eBPF programs are written in Rust and therefore get no CO-RE
//! relocations from the compiler: a program that reads `sk->__sk_common.skc_state`
//! with a hard-coded offset would silently read garbage on a kernel whose
//! `struct sock_common` layout differs. Instead, the agent asks this module for
//! the handful of offsets it needs at load time and hands them to the programs
//! as globals.
//!
//! Only what that job needs is implemented: the header, a walk over the type
//! section (every kind must be understood, because records are variable-sized
//! and one mis-sized record desynchronises everything after it), and member
//! lookup in structs/unions, including members hidden inside anonymous
//! structs/unions. The format is described in the kernel's
//! `Documentation/bpf/btf.rst` and `include/uapi/linux/btf.h`.
//!
//! The input is treated as untrusted: every read is bounds-checked and every
//! walk is bounded, so a truncated or hostile blob yields a [`BtfError`], never
//! a panic or a hang.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Where the running kernel exposes its own BTF.
pub const VMLINUX_BTF_PATH: &str = "/sys/kernel/btf/vmlinux";

const BTF_MAGIC: u16 = 0xeb9f;
const BTF_VERSION: u8 = 1;
/// Size of the version-1 header; `hdr_len` may be larger (newer fields we
/// ignore) but never smaller.
const HEADER_LEN: usize = 24;
/// `struct btf_type`: name_off, info, size_or_type.
const TYPE_LEN: usize = 12;
/// `struct btf_member`: name_off, type, offset.
const MEMBER_LEN: usize = 12;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_FLOAT: u32 = 16;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// Longest typedef/const/volatile/... chain we follow. Real chains are a few
/// links long; the cap turns a hostile cycle into an error instead of a hang.
const MAX_MODIFIER_CHAIN: usize = 32;
/// How deep anonymous structs/unions may nest. The deepest in 6.18 vmlinux is
/// 6 (`struct slab`); the cap keeps a self-containing hostile struct from
/// overflowing the stack.
const MAX_ANON_DEPTH: u32 = 16;
/// How many anonymous struct/union members one lookup may descend into. A
/// depth cap alone is not enough: a DAG of anonymous members can fan out
/// exponentially, so we also bound total work. The worst in 6.18 vmlinux is 23
/// (`struct net_device_stats`).
const MAX_ANON_VISITS: u32 = 1024;

/// Why BTF could not be read or could not answer a question.
///
/// Messages are meant to be shown to an operator as-is.
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    #[error(
        "kernel BTF not found at {}: graceful needs a kernel built with CONFIG_DEBUG_INFO_BTF=y",
        path.display()
    )]
    NotFound { path: PathBuf },

    #[error(
        "cannot read kernel BTF at {}: {err} (is /sys mounted in the agent's container and readable?)",
        path.display()
    )]
    Read { path: PathBuf, err: io::Error },

    #[error("not a BTF blob: magic is {0:#06x}, expected 0xeb9f")]
    BadMagic(u16),

    #[error("BTF blob is big-endian (magic 0x9feb): graceful only supports little-endian hosts")]
    WrongEndian,

    #[error("BTF version {0} is not supported: graceful understands version 1 only")]
    UnsupportedVersion(u8),

    #[error("BTF type {id} has unknown kind {kind}: this kernel's BTF is newer than graceful's reader, upgrade graceful")]
    UnknownKind { id: u32, kind: u32 },

    #[error("malformed BTF: {0}")]
    Malformed(String),

    #[error("struct {0} not found in kernel BTF: this kernel is not supported by graceful")]
    StructNotFound(String),

    #[error("kernel BTF defines {definitions} different structs named {strukt}: graceful cannot tell which one is meant")]
    AmbiguousStruct { strukt: String, definitions: u32 },

    #[error("struct {strukt} has no member {member} in kernel BTF: this kernel's layout is not supported by graceful")]
    MemberNotFound { strukt: String, member: String },

    #[error("{strukt}.{member} is not a struct or union, so the path cannot descend into it")]
    NotAggregate { strukt: String, member: String },

    #[error("{strukt}.{member} is a bitfield and has no byte offset: read the enclosing field instead")]
    Bitfield { strukt: String, member: String },

    #[error("{strukt}.{member} is at bit offset {bits}, which is not byte-aligned")]
    NotByteAligned {
        strukt: String,
        member: String,
        bits: u64,
    },
}

fn malformed(msg: impl Into<String>) -> BtfError {
    BtfError::Malformed(msg.into())
}

/// Parsed BTF blob with a name index over its structs and unions.
pub struct Btf {
    data: Vec<u8>,
    types: Range<usize>,
    strs: Range<usize>,
    /// `type_pos[id]` is where type `id`'s record starts in `data`. Type ids are
    /// implicit (1-based order in the type section); id 0 is `void` and has no
    /// record, so slot 0 is a placeholder.
    type_pos: Vec<usize>,
    /// Named STRUCT/UNION kinds (C puts struct and union tags in one
    /// namespace).
    aggregates: HashMap<Box<str>, Aggregate>,
}

impl fmt::Debug for Btf {
    // The blob is megabytes; print its shape, not its bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Btf")
            .field("bytes", &self.data.len())
            .field("types", &(self.type_pos.len() - 1))
            .field("named_structs_and_unions", &self.aggregates.len())
            .finish()
    }
}

/// Index entry for a struct/union name.
struct Aggregate {
    /// The first definition's type id.
    id: u32,
    /// vmlinux BTF is deduplicated, yet unrelated file-local structs can share
    /// a name (6.18 has four `struct workspace`). Picking one would silently
    /// yield another struct's offsets, so lookups refuse ambiguous names.
    definitions: u32,
}

/// A decoded `struct btf_type` header.
#[derive(Clone, Copy)]
struct TypeRec {
    name_off: u32,
    kind: u32,
    vlen: u32,
    kind_flag: bool,
    size_or_type: u32,
    /// Start of the kind-specific data that follows the 12-byte header.
    body: usize,
}

/// A member found by name, with its offset made absolute within the
/// outermost aggregate searched.
struct Found {
    bits: u64,
    bitfield: bool,
    type_id: u32,
}

fn read_u32(data: &[u8], pos: usize) -> Option<u32> {
    let bytes = data.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

/// Resolves a header (offset, length) pair, relative to the end of the header,
/// into a checked byte range of the blob.
fn section(hdr_len: usize, off: u32, len: u32, total: usize, name: &str) -> Result<Range<usize>, BtfError> {
    let start = hdr_len.checked_add(off as usize);
    let end = start.and_then(|s| s.checked_add(len as usize));
    match (start, end) {
        (Some(start), Some(end)) if end <= total => Ok(start..end),
        _ => Err(malformed(format!(
            "{name} section (offset {off}, length {len}) runs past the {total}-byte blob"
        ))),
    }
}

/// Bytes of kind-specific data following the common header of a record.
fn extra_len(id: u32, kind: u32, vlen: usize) -> Result<usize, BtfError> {
    Ok(match kind {
        KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
        KIND_ARRAY => 12,
        KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
        KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
        KIND_PTR | KIND_FWD | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_FUNC
        | KIND_FLOAT | KIND_TYPE_TAG => 0,
        _ => return Err(BtfError::UnknownKind { id, kind }),
    })
}

impl Btf {
    /// Reads and parses the running kernel's BTF from [`VMLINUX_BTF_PATH`].
    pub fn from_sys_fs() -> Result<Btf, BtfError> {
        Btf::from_path(VMLINUX_BTF_PATH)
    }

    /// Reads and parses a raw BTF blob (not an ELF file) from `path`.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Btf, BtfError> {
        let path = path.as_ref();
        let data = std::fs::read(path).map_err(|err| {
            if err.kind() == io::ErrorKind::NotFound {
                BtfError::NotFound {
                    path: path.to_owned(),
                }
            } else {
                BtfError::Read {
                    path: path.to_owned(),
                    err,
                }
            }
        })?;
        Btf::parse(data)
    }

    /// Validates the header, walks the whole type section once, and indexes
    /// named structs and unions.
    pub fn parse(data: Vec<u8>) -> Result<Btf, BtfError> {
        if data.len() < HEADER_LEN {
            return Err(malformed(format!(
                "blob is {} bytes, shorter than the {HEADER_LEN}-byte header",
                data.len()
            )));
        }
        let magic = u16::from_le_bytes([data[0], data[1]]);
        if magic == BTF_MAGIC.swap_bytes() {
            return Err(BtfError::WrongEndian);
        }
        if magic != BTF_MAGIC {
            return Err(BtfError::BadMagic(magic));
        }
        if data[2] != BTF_VERSION {
            return Err(BtfError::UnsupportedVersion(data[2]));
        }
        // The length check above makes these header reads infallible.
        let field = |pos| read_u32(&data, pos).unwrap_or(0);
        let hdr_len = field(4) as usize;
        if hdr_len < HEADER_LEN || hdr_len > data.len() {
            return Err(malformed(format!(
                "header length {hdr_len} is outside {HEADER_LEN}..={}",
                data.len()
            )));
        }
        let types = section(hdr_len, field(8), field(12), data.len(), "type")?;
        let strs = section(hdr_len, field(16), field(20), data.len(), "string")?;

        // The spec requires the string section to start with the empty string
        // (name_off 0 means "anonymous"), and the kernel requires it to end in
        // NUL; the latter also guarantees every string lookup terminates.
        if strs.is_empty() || data[strs.start] != 0 || data[strs.end - 1] != 0 {
            return Err(malformed("string section must start and end with a NUL byte"));
        }

        let mut btf = Btf {
            // Every record is at least 12 bytes, which bounds the type count.
            type_pos: Vec::with_capacity(types.len() / 16 + 1),
            aggregates: HashMap::new(),
            data,
            types,
            strs,
        };
        btf.type_pos.push(0);
        btf.index_types()?;
        Ok(btf)
    }

    fn index_types(&mut self) -> Result<(), BtfError> {
        let mut aggregates: HashMap<Box<str>, Aggregate> = HashMap::new();
        let mut pos = self.types.start;
        while pos < self.types.end {
            let id = u32::try_from(self.type_pos.len()).map_err(|_| malformed("more than 2^32 types"))?;
            if self.types.end - pos < TYPE_LEN {
                return Err(malformed(format!("type {id} header is truncated")));
            }
            let rec = self.decode(pos)?;
            let next = pos + TYPE_LEN + extra_len(id, rec.kind, rec.vlen as usize)?;
            if next > self.types.end {
                return Err(malformed(format!(
                    "type {id} (kind {}, vlen {}) runs past the end of the type section",
                    rec.kind, rec.vlen
                )));
            }
            if (rec.kind == KIND_STRUCT || rec.kind == KIND_UNION) && rec.name_off != 0 {
                let name = self.str_at(rec.name_off)?;
                if let Some(entry) = aggregates.get_mut(name) {
                    entry.definitions += 1;
                } else if !name.is_empty() {
                    aggregates.insert(name.into(), Aggregate { id, definitions: 1 });
                }
            }
            self.type_pos.push(pos);
            pos = next;
        }
        self.aggregates = aggregates;
        Ok(())
    }

    /// True if the BTF defines a struct (or union) called `name` (possibly
    /// more than one; see [`BtfError::AmbiguousStruct`]).
    pub fn has_struct(&self, name: &str) -> bool {
        self.aggregates.contains_key(name)
    }

    /// `sizeof(struct name)` in bytes, if exactly one struct (or union) has
    /// that name.
    pub fn struct_size(&self, name: &str) -> Option<u32> {
        let id = self.aggregate(name).ok()?;
        self.type_rec(id).ok().map(|rec| rec.size_or_type)
    }

    fn aggregate(&self, name: &str) -> Result<u32, BtfError> {
        match self.aggregates.get(name) {
            None => Err(BtfError::StructNotFound(name.to_owned())),
            Some(a) if a.definitions > 1 => Err(BtfError::AmbiguousStruct {
                strukt: name.to_owned(),
                definitions: a.definitions,
            }),
            Some(a) => Ok(a.id),
        }
    }

    /// Byte offset of `member` within struct (or union) `strukt`.
    ///
    /// Fails with [`BtfError::AmbiguousStruct`] if several unrelated structs
    /// share the name `strukt`.
    ///
    /// Members of anonymous nested structs/unions are found as if they were
    /// direct members, as in C. `member` may also be a dotted path through
    /// named nested aggregates, e.g. `("sock", "__sk_common.skc_state")`, in
    /// which case the offsets are summed.
    ///
    /// Bitfields and members that do not start on a byte boundary are errors:
    /// a byte offset alone cannot describe them.
    pub fn member_offset(&self, strukt: &str, member: &str) -> Result<u32, BtfError> {
        let not_found = || BtfError::MemberNotFound {
            strukt: strukt.to_owned(),
            member: member.to_owned(),
        };
        let id = self.aggregate(strukt)?;
        // An empty segment would match an anonymous member itself.
        if member.split('.').any(str::is_empty) {
            return Err(not_found());
        }
        let mut rec = self.type_rec(id)?;
        let mut bits = 0u64;
        let mut segments = member.split('.').peekable();
        while let Some(segment) = segments.next() {
            let mut budget = MAX_ANON_VISITS;
            let found = self
                .find_member(rec, segment, bits, 0, &mut budget)?
                .ok_or_else(not_found)?;
            if found.bitfield {
                return Err(BtfError::Bitfield {
                    strukt: strukt.to_owned(),
                    member: member.to_owned(),
                });
            }
            bits = found.bits;
            if segments.peek().is_some() {
                let (_, inner) = self.skip_modifiers(found.type_id)?;
                if inner.kind != KIND_STRUCT && inner.kind != KIND_UNION {
                    return Err(BtfError::NotAggregate {
                        strukt: strukt.to_owned(),
                        member: member.to_owned(),
                    });
                }
                rec = inner;
            }
        }
        if !bits.is_multiple_of(8) {
            return Err(BtfError::NotByteAligned {
                strukt: strukt.to_owned(),
                member: member.to_owned(),
                bits,
            });
        }
        u32::try_from(bits / 8).map_err(|_| malformed(format!("offset of {strukt}.{member} overflows")))
    }

    /// Searches `agg`'s direct members first, then recurses into anonymous
    /// struct/union members. `base` is `agg`'s own bit offset in the outermost
    /// aggregate, so the result is absolute. `depth` and `budget` bound the
    /// recursion against hostile input (see the constants).
    fn find_member(
        &self,
        agg: TypeRec,
        name: &str,
        base: u64,
        depth: u32,
        budget: &mut u32,
    ) -> Result<Option<Found>, BtfError> {
        for i in 0..agg.vlen {
            let (name_off, type_id, bit_off, bitfield_size) = self.member(agg, i)?;
            if self.str_at(name_off)? == name {
                let bitfield = bitfield_size != 0 || (!agg.kind_flag && self.is_legacy_bitfield(type_id)?);
                return Ok(Some(Found {
                    bits: base.saturating_add(u64::from(bit_off)),
                    bitfield,
                    type_id,
                }));
            }
        }
        for i in 0..agg.vlen {
            let (name_off, type_id, bit_off, _) = self.member(agg, i)?;
            if name_off != 0 && !self.str_at(name_off)?.is_empty() {
                continue;
            }
            if depth >= MAX_ANON_DEPTH || *budget == 0 {
                return Err(malformed("anonymous members nest too deeply or form a cycle"));
            }
            *budget -= 1;
            let (_, inner) = self.skip_modifiers(type_id)?;
            if inner.kind != KIND_STRUCT && inner.kind != KIND_UNION {
                continue;
            }
            if let Some(found) = self.find_member(
                inner,
                name,
                base.saturating_add(bit_off.into()),
                depth + 1,
                budget,
            )? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// Member `i` of `agg` as (name_off, type, bit offset, bitfield size).
    fn member(&self, agg: TypeRec, i: u32) -> Result<(u32, u32, u32, u32), BtfError> {
        // `index_types` already checked that all vlen members lie inside the
        // type section; the reads are checked anyway so no path can panic.
        let pos = agg.body + i as usize * MEMBER_LEN;
        let get = |at| read_u32(&self.data, at).ok_or_else(|| malformed("member out of bounds"));
        let (name_off, type_id, offset) = (get(pos)?, get(pos + 4)?, get(pos + 8)?);
        // With kind_flag set, the top 8 bits carry the bitfield size.
        let (bit_off, bitfield_size) = if agg.kind_flag {
            (offset & 0x00ff_ffff, offset >> 24)
        } else {
            (offset, 0)
        };
        Ok((name_off, type_id, bit_off, bitfield_size))
    }

    /// Without kind_flag, BTF marks a bitfield by pointing the member at an
    /// INT whose bit width is narrower than its storage or that has a non-zero
    /// bit offset of its own.
    fn is_legacy_bitfield(&self, type_id: u32) -> Result<bool, BtfError> {
        let (_, rec) = self.skip_modifiers(type_id)?;
        if rec.kind != KIND_INT {
            return Ok(false);
        }
        let encoding = read_u32(&self.data, rec.body).ok_or_else(|| malformed("int out of bounds"))?;
        let bits = encoding & 0xff;
        let offset = (encoding >> 16) & 0xff;
        Ok(offset != 0 || u64::from(bits) != u64::from(rec.size_or_type) * 8)
    }

    /// Follows typedef/const/volatile/restrict/type_tag links to the
    /// underlying type, because an anonymous member's type may be qualified.
    fn skip_modifiers(&self, mut id: u32) -> Result<(u32, TypeRec), BtfError> {
        for _ in 0..MAX_MODIFIER_CHAIN {
            let rec = self.type_rec(id)?;
            match rec.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = rec.size_or_type
                }
                _ => return Ok((id, rec)),
            }
        }
        Err(malformed(format!(
            "type chain through {id} is longer than {MAX_MODIFIER_CHAIN} links (cycle?)"
        )))
    }

    fn type_rec(&self, id: u32) -> Result<TypeRec, BtfError> {
        match self.type_pos.get(id as usize) {
            Some(&pos) if id != 0 => self.decode(pos),
            _ => Err(malformed(format!(
                "reference to type {id}, but valid ids are 1..={}",
                self.type_pos.len() - 1
            ))),
        }
    }

    fn decode(&self, pos: usize) -> Result<TypeRec, BtfError> {
        let get = |at| read_u32(&self.data, at).ok_or_else(|| malformed("type out of bounds"));
        let info = get(pos + 4)?;
        Ok(TypeRec {
            name_off: get(pos)?,
            kind: (info >> 24) & 0x1f,
            vlen: info & 0xffff,
            kind_flag: info >> 31 != 0,
            size_or_type: get(pos + 8)?,
            body: pos + TYPE_LEN,
        })
    }

    fn str_at(&self, off: u32) -> Result<&str, BtfError> {
        let bad = || malformed(format!("string offset {off} is invalid"));
        let start = self
            .strs
            .start
            .checked_add(off as usize)
            .filter(|&s| s < self.strs.end)
            .ok_or_else(bad)?;
        let tail = &self.data[start..self.strs.end];
        let len = tail.iter().position(|&b| b == 0).ok_or_else(bad)?;
        std::str::from_utf8(&tail[..len]).map_err(|_| bad())
    }
}

#[cfg(test)]
mod tests;
