//! Binding tests shared by the Node (`node.rs`) and browser (`browser.rs`) suites. They call the
//! exported functions the way JavaScript does and inspect the returned JS values.

mod analysis;
mod floats;
mod load;
#[cfg(feature = "sim")]
mod scenario;
pub(crate) mod support;
mod trace;
