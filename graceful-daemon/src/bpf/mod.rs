//! Everything that touches BPF: the embedded object, the bpffs, pins,
//! loading and attaching, and reading the maps back.
pub mod bpffs;
pub mod btf;
pub mod error;
pub mod filters;
pub mod kernel;
pub mod layout;
pub mod links;
pub mod loader;
pub mod maps;
pub mod object;
pub mod offsets;
pub mod open;
pub mod paths;
pub mod pinned;
pub mod query;
pub mod retire;
pub mod ring;

pub use error::MapError;
pub use kernel::Kernel;
