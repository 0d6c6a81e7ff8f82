pub mod netns;
pub mod pass;
pub mod repair;
pub mod sockdiag;
