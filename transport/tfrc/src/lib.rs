//! TFRC and RE-TFRC.
