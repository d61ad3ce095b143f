//! Interop tests: walissh between the real OpenSSH client and a real
//! OpenSSH server, with a real SQLite audit file.

mod harness;
mod model;

mod agent;
mod audit_read;
mod certs;
mod clean;
mod cli;
mod cluster;
mod context;
mod crash;
mod four_eyes;
mod hardening;
mod integrity;
mod jump;
mod lifecycle;
mod live;
mod login;
mod mcp;
mod mfa;
mod nested;
mod proxy;
mod redact;
mod sandbox;
mod storage;
mod tamper;
mod targets;
mod team;
mod terminal;
mod upstream;
mod web;
