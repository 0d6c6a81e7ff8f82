//! Everything that touches BPF: the embedded object, the bpffs, pins,
//! loading and attaching, and reading the maps back.
pub mod bpffs;
pub mod btf;
pub mod error;
pub mod filters;
pub mod handle;
pub mod layout;
pub mod links;
pub mod loader;
pub mod maps;
pub mod object;
pub mod offsets;
pub mod open;
pub mod paths;
pub mod pinned;
pub mod programs;
pub mod query;
pub mod ring;
pub mod state_programs;

pub use error::MapError;
pub use handle::Kernel;
