//! Everything that touches BPF: the embedded object, the bpffs, pins,
//! loading and attaching, and reading the maps back.
pub mod bpffs;
pub mod btf;
pub mod counters;
pub mod layout;
pub mod loader;
pub mod object;
pub mod paths;
