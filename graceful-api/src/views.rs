//! What the agent's local API answers (`/v1/pods`, `/v1/cgroups`,
//! `/v1/doctor`, `/v1/drains` and `/readyz`) and the tables every client prints from it:
//! `graceful` on the node and `kubectl graceful` through the API server
//! show the same rows, written once here.

pub mod at_risk;
pub mod cgroups;
pub mod doctor;
pub mod drains;
pub mod pods;
pub mod recommend;
pub mod status;
pub mod table;
