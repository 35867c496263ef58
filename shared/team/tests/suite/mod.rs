mod builder;
mod common;
mod router;
