//! How servers speak: the [`exchange`] a target hands back, one
//! [`dialect`] per wire protocol that reads it into a [`reply`], and the
//! vendors' published reply schemas ([`spec_schemas`]), and the steps of
//! OpenAI's Batch API ([`batch`]).

pub mod batch;
pub mod dialect;
pub mod endpoint;
pub mod exchange;
pub mod reply;
pub mod spec_schemas;
