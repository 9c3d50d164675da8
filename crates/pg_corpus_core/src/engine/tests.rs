//! Test support of the engine: each stage's tests are that stage's own `mod tests`; they share
//! the fake executor and the builders in `fake`. `find_similar`'s tests are in `similar`.

pub(super) mod fake;
mod similar;
