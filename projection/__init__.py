"""hitrate.projection: messages -> ordered, hashed sections -> wire-neutral prompt; breakpoints, miss explanation, lint."""
