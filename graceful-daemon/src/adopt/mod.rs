pub mod netns;
pub mod pass;
pub mod sockdiag;
