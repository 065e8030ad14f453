-- How many orders are in each state.
SELECT state, count(*) FROM orders GROUP BY state;
