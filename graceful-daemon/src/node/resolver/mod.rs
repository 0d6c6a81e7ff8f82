//! Which pod and container a cgroup belongs to, kept current as pods come
//! and go.
//!
//! - [`path`]: a cgroup path → pod uid, QoS, container id and runtime;
//! - [`index`]: every pod on the node from the cgroup tree, and the reverse
//!   lookups (cgroup id or pid → owner);
//! - [`watch`]: keeps an index current from inotify on the cgroup tree;
//! - [`counts`]: a pod's and its containers' live counts, and the rows
//!   `graceful pods` and the API show.
pub mod counts;
pub mod index;
pub mod inotify;
pub mod path;
pub mod tree;
pub mod watch;
