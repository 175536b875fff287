//! Passes that apply to every dialect. One file per pass, named as its
//! flag: `--canonicalize` is [`canonicalize`].

pub mod canonicalize;
