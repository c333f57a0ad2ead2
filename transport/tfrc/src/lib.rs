//! TFRC and RE-TFRC.
pub mod equation;
pub mod loss;
pub mod packet;
pub mod re;
pub mod receiver;
pub mod sender;
