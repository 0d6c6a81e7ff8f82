#![no_std]
// This file exists so that graceful-daemon can depend on this crate (and be
// rebuilt when it changes); the programs themselves are in main.rs.
