//! The reference hub (to be written).
