pub mod membership;
