//! Stand-alone inspection commands: `kvp dump`, `report parse`, `vectors check`.
