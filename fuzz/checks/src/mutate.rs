//! A fixed run of mutations of a target's seeds, for `cargo test`: the
//! same inputs on every run (a seeded xorshift), so a failure names an
//! input that fails again. It finds what a seed is a step or two away
//! from; the coverage-guided search is libFuzzer's (`cargo xtask fuzz`).

/// xorshift64*: small, fast and the same everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Bytes the parsers give meaning to: JSON's, HTTP's, the query's, the
/// durations', and the edges of integers.
const TOKENS: &[&[u8]] = &[
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"\\u0000",
    b"\r\n",
    b"\r\n\r\n",
    b" ",
    b"%",
    b"%2",
    b"&",
    b"=",
    b"+",
    b"?",
    b"/",
    b"0",
    b"-1",
    b"18446744073709551615",
    b"1e400",
    b"ms",
    b"s",
    b"h",
    b"null",
    b"true",
    b"chunked",
    b"content-length: ",
    b"\xff",
    b"\xc3",
];

/// One mutation of `input`, perhaps spliced with `other`.
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..=rng.below(3) {
        let len = out.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                out[i] = [0, 0x7f, 0x80, 0xff, b'9', b'a'][rng.below(6)];
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                let at = rng.below(len + 1);
                out.splice(at..at, t.iter().copied());
            }
            3 if len > 0 => {
                let from = rng.below(len);
                let to = (from + 1 + rng.below(16)).min(len);
                out.drain(from..to);
            }
            4 if len > 0 => {
                let from = rng.below(len);
                let to = (from + 1 + rng.below(64)).min(len);
                let copy = out[from..to].to_vec();
                let at = rng.below(len + 1);
                out.splice(at..at, copy);
            }
            5 if !other.is_empty() => {
                let cut = rng.below(len + 1);
                let from = rng.below(other.len());
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            _ => {
                let at = rng.below(len + 1);
                out.insert(at, rng.next_u64() as u8);
            }
        }
    }
    out
}
