//! The kernel side: everything graceful asks of the running kernel, and
//! nothing about pods.
//!
//! - [`version`]: the running kernel's version, and the floor graceful
//!   supports;
//! - [`cgroupfs`]: the cgroup v2 hierarchy, ids and paths;
//! - [`bpf`]: the kernel programs, their pins and maps;
//! - [`adopt`]: the sockets the programs did not see open (sock_diag,
//!   netns);
//! - [`counted`]: the pinned counts per cgroup path (`graceful cgroups`,
//!   `/v1/cgroups`);
//! - [`memcg`]: the agent's memory budget, which grows with the node's
//!   sockets;
//! - [`nofile`]: the process's limit on open files.

pub mod adopt;
pub mod bpf;
pub mod cgroupfs;
pub mod counted;
pub mod memcg;
pub mod nofile;
pub mod version;
