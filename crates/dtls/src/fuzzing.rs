//! Entry points for the fuzz targets and the corpus test.
