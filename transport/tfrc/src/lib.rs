//! TFRC and RE-TFRC.
pub mod equation;
pub mod loss;
pub mod net;
pub mod packet;
pub mod re;
pub mod receiver;
pub mod sender;
pub mod units;
