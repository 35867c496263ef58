mod approver;
mod builder;
mod common;
mod delivery;
mod router;
mod shutdown;
mod teammate;
mod tools;
