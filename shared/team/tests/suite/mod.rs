mod builder;
