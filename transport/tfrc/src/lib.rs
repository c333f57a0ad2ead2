//! TFRC and RE-TFRC.
pub mod equation;
pub mod loss;
pub mod packet;
