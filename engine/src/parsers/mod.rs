//! Output parsers: reasoning separation and tool-call extraction from model
//! text, incrementally (being built).
