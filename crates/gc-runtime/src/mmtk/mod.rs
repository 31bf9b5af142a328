//! MMTk behind the runtime (issue 26 §3): the binding of the `mmtk` crate's plans to this
//! runtime's objects and roots. Work in progress; nothing here is used by the runtime yet.
